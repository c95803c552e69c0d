const huge = "x".repeat(1200 * 1024);
try {
  await shop.createItem({ huge });
  console.log("sent");
} catch (e) {
  console.log(e.message);
}
