const r = await shop.submitForm({ city: "Zürich", mark: "✓" });
console.log(r.received, r.kind);
