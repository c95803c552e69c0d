const r = await shop.submitForm({ name: "Ann", note: "a&b=c d", n: 3 });
console.log(JSON.stringify(r));
