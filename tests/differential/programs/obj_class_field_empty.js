class Store { data = {}; count = 0; }
const s = new Store();
const it = await shop.getItem("c1");
s.data[it.id] = it;
s.count++;
console.log(Object.keys(s.data).join(), s.count, Object.keys(new Store().data).length);
