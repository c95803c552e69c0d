const r = await shop.post("/v1/items", { raw: true });
console.log(JSON.stringify(r.created));
