console.log("before");
throw new Error("agent gave up");
