// "Copy as SQL": puts the text of the element a button names on the clipboard.
"use strict";
(function () {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async function () {
      const source = document.getElementById(button.dataset.copy);
      const text = source ? source.textContent : "";
      try {
        await navigator.clipboard.writeText(text);
      } catch (err) {
        const range = document.createRange(); // no clipboard permission: select it instead
        range.selectNodeContents(source);
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
      }
      button.textContent = button.dataset.done;
    });
  }
})();
