try {
  await shop.getItem("missing-p");
} catch (e) {
  const m = e.message.match(/^host api (\d+): (.*)$/s);
  const body = JSON.parse(m[2]);
  console.log(m[1], body.error, body.id);
}
