const [head, ...tail] = (await shop.listItems({ limit: 5 })).items;
console.log(head.id, tail.length);
