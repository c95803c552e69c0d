try {
  const it = await shop.getItem("te");
  it.nothing.deeper = 1;
} catch (e) {
  console.log(e.name, e instanceof TypeError);
}
