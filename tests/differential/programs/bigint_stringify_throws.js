try {
  JSON.stringify({ n: 1n });
} catch (e) {
  console.log(e.name);
}
await shop.getStats();
