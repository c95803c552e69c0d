const it = await shop.getItem("ng");
const m = it.meta.created.match(/(?<y>\d{4})-(?<mo>\d{2})-(?<d>\d{2})/);
console.log(m.groups.y, m.groups.mo, m.groups.d);
