const it = await shop.getItem("enc");
console.log(encodeURIComponent(it.name + "&x=1/é"), decodeURIComponent("%E2%9C%93"), encodeURI("/a b?c=d"));
