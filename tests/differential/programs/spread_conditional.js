const it = await shop.getItem("cond");
const body = { id: it.id, ...(it.active ? { active: true } : {}), ...(it.owner ? { owner: it.owner } : {}) };
console.log(JSON.stringify(body));
