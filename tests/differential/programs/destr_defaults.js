const { missing = "dflt", owner = "noone", stock = -1 } = await shop.getItem("dd");
console.log(missing, owner, stock >= 0);
