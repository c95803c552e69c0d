try {
  await shop.listItems({ page: 1, bogus: "x" });
} catch (e) {
  console.log(e.name, e.message);
}
