try {
  try { await shop.getItem("boom-c"); } catch (e) { throw new Error("wrapped", { cause: e }); }
} catch (e) {
  console.log(e.message, e.cause.message.slice(0, 12));
}
