try {
  await shop.getItem({ id: 1 });
} catch (e) {
  console.log(e.name, e.message);
}
