try {
  await shop.getItem("..");
  console.log("sent");
} catch (e) {
  console.log("refused", e.message.slice(0, 9));
}
