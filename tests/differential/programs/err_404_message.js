try {
  await shop.getItem("missing-404");
  console.log("no error?");
} catch (e) {
  console.log(e instanceof Error, e.message);
}
