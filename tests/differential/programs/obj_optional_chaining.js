const it = await shop.getItem("oc");
console.log(it.attrs?.color ?? "none", it.owner?.name ?? "nobody", it.meta?.extra?.deep?.x);
