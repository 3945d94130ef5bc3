// placeholder: filled in by the component's author
