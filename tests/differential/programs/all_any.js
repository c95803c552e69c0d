const got = await Promise.any([shop.getItem("missing-a"), shop.getItem("any-ok")]);
console.log(got.id);
