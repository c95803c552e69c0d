const it = await shop.getItem("b64");
const enc = btoa(it.name);
console.log(enc, atob(enc));
