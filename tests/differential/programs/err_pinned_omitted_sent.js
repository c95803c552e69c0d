const r = await shop.listUsers({ page: 2 });
console.log(r.users.map((u) => u.org).join(","), r.page);
