const { name: title, price: cost } = await shop.getItem("ren");
console.log(title, cost);
