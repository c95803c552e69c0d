let deep = {};
const root = deep;
for (let i = 0; i < 20; i++) { deep.child = {}; deep = deep.child; }
deep.leaf = true;
const r = await shop.createItem(root);
let n = 0, cur = r.created;
while (cur.child) { cur = cur.child; n++; }
console.log(n, cur.leaf);
