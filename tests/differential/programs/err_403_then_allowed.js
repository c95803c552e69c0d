const results = [];
for (const org of ["globex", "acme"]) {
  try {
    const r = await shop.listUsers({ org });
    results.push(org + ":" + r.users.length);
  } catch (e) {
    results.push(org + ":denied");
  }
}
console.log(results.join(" "));
