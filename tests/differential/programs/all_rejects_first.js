try {
  await Promise.all([shop.getItem("fine"), shop.getItem("missing-x")]);
} catch (e) {
  console.log("caught", e.message);
}
