const v = await shop.getItem("missing-z").then((it) => it.id).catch((e) => "fallback:" + e.message.slice(0, 12));
console.log(v);
