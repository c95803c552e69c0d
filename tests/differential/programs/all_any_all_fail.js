try {
  await Promise.any([shop.getItem("missing-a"), shop.getItem("missing-b")]);
} catch (e) {
  console.log(e.name, e.errors.length, e.errors.map((x) => x.message.slice(0, 12)).join("/"));
}
