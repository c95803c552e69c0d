class NotFound extends Error { name = "NotFound"; }
try {
  try { await shop.getItem("missing-nf"); } catch (e) { throw new NotFound(e.message.slice(0, 12)); }
} catch (e) {
  console.log(e.name, e.message, String(e));
}
