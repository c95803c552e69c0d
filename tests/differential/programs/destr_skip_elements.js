const [, second, , fourth] = (await shop.listItems({ limit: 4 })).items.map((i) => i.id);
console.log(second, fourth);
