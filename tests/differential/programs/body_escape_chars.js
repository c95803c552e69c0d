const r = await shop.createItem({ s: 'quote " backslash \\ slash / nl \n cr \r', ctl: "\u0001\u001f" });
console.log(JSON.stringify(r.created));
