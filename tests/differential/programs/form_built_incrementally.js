const form = {};
const it = await shop.getItem("fb");
form.id = it.id;
form.qty = String(it.stock);
const r = await shop.submitForm(form);
console.log(r.kind, r.received);
