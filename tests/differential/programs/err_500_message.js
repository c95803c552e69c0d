try {
  await shop.getItem("boom-500");
} catch (e) {
  console.log(e.message);
}
