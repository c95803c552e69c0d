const r = await shop.uploadFile({ title: "report", count: "2" });
console.log(JSON.stringify(r));
