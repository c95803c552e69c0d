try {
  const r = await shop.submitForm({ tags: ["a", "b"] });
  console.log("sent", r.received);
} catch (e) {
  console.log("refused", e.message.slice(0, 12));
}
