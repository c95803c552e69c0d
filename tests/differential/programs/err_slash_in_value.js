try {
  await shop.getItem("a/b");
  console.log("sent");
} catch (e) {
  console.log(e.message.slice(0, 16));
}
