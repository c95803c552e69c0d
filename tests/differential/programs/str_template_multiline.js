const it = await shop.getItem("tm");
console.log(`Item: ${it.name}
Price: ${it.price.toFixed(2)}
Tags: ${it.tags.join(", ") || "(none)"}`);
