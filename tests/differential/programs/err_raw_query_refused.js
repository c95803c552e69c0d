try {
  await shop.get("/v1/items?page=2");
} catch (e) {
  console.log(e.message);
}
