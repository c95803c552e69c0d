console.log("trying");
await shop.adminReset({});
