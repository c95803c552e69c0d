let attempts = 0, result = null;
while (attempts < 3 && !result) {
  attempts++;
  try { result = await shop.getItem(attempts < 3 ? "boom-r" : "fine"); } catch (e) { /* retry */ }
}
console.log(attempts, result && result.id);
