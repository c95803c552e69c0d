const r = await shop.listUsers({ org: "acme" });
r.users[0].roles.admin = true;
console.log(JSON.stringify(r.users.map((u) => u.roles)));
