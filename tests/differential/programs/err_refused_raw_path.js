try {
  await shop.get("/v1/admin/reset");
} catch (e) {
  console.log(e.message);
}
