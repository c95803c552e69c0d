const it = await shop.getItem("nf");
console.log(it.price.toFixed(1), (it.price * 1000).toPrecision(3), (255).toString(16), (0.000001234).toExponential(2), Number("12px"), parseInt("12px"), parseFloat("3.5e2x"));
