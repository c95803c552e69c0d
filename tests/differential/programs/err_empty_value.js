try {
  await shop.getItem("");
} catch (e) {
  console.log("refused", e.message.slice(0, 9));
}
