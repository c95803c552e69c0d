try {
  await shop.listUsers({ org: "globex" });
} catch (e) {
  console.log(e.message.slice(0, 13));
}
