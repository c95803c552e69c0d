let cleaned = false;
try {
  await shop.getItem("boom-f").finally(() => { cleaned = true; });
} catch (e) {
  console.log("err", cleaned);
}
