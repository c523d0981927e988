document.getElementById("app").textContent = "Queen console";
