try {
  await shop.listItems("page=1");
} catch (e) {
  console.log(e.name, e.message);
}
