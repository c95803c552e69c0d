const r = await shop.createItem({ n: 123456789012345680000, f: 0.1 + 0.2, e: 1e-7 });
console.log(JSON.stringify(r.created), String(r.created.f));
