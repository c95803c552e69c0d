const it = await shop.getItem("raw");
console.log(String.raw`a\nb${it.id}\t`);
